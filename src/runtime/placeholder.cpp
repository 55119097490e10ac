// Replaced by the runtime's first real source file.
