#!/usr/bin/env python3
"""The tuned rows of a `weft tune -o` table, as selection/ranks-N.json ships them.

`weft tune` writes its rows first and weft's default table's rows after them (their notes
begin "weft's default table"), so that the file can be used alone through WEFT_SELECTION.
A table built in for one rank count (selection/ranks-N.json, docs/runtime.md) must hold
only rows for that count: the calls it does not cover fall through to the default table
anyway. This keeps the tuned rows, says so in the description, and writes one row per line.

    scripts/tuned_rows.py TUNED.json OUT.json
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: tuned_rows.py TUNED.json OUT.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        table = json.load(f)
    if table.get("format") != "weft-selection" or not isinstance(table.get("rows"), list):
        print(f"tuned_rows.py: {argv[1]} is not a weft-selection table", file=sys.stderr)
        return 2
    rows = [r for r in table["rows"] if not str(r.get("note", "")).startswith("weft's default table")]
    if not rows:
        print(f"tuned_rows.py: {argv[1]} has no tuned rows", file=sys.stderr)
        return 1
    desc = table.get("description", "")
    cut = desc.find(" The tuned rows come first")
    if cut >= 0:
        desc = desc[:cut]
    desc += " Tuned rows only (scripts/tuned_rows.py): calls they do not cover take weft's default table."
    lines = ",\n".join("    " + json.dumps(r, separators=(",", ":")) for r in rows)
    with open(argv[2], "w") as f:
        f.write('{\n  "format": "weft-selection",\n  "version": %d,\n  "description": %s,\n  "rows": [\n%s\n  ]\n}\n'
                % (table.get("version", 1), json.dumps(desc), lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
