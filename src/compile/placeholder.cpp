// Replaced by the stage's first real source file.
