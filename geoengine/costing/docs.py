"""docs/costing.md option tables, generated from the costing tables (a test keeps them in sync)."""

from __future__ import annotations

from geoengine.costing.schema import COSTINGS, TABLES

BEGIN = "<!-- BEGIN GENERATED OPTION TABLES (python -m geoengine.costing.docs) -->"
END = "<!-- END GENERATED OPTION TABLES -->"


def _fmt(v) -> str:
    if v is None:
        return "see description"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def render() -> str:
    out = [BEGIN, ""]
    for costing in COSTINGS:
        out.append(f"### {costing}")
        out.append("")
        out.append("| option | type | minimum | maximum | default | meaning |")
        out.append("|---|---|---|---|---|---|")
        for o in TABLES[costing]:
            typ = o.type if not o.enum else f"string: {', '.join(o.enum)}"
            lo = "" if o.minimum is None else _fmt(o.minimum)
            hi = "" if o.maximum is None else _fmt(o.maximum)
            out.append(f"| {o.name} | {typ} | {lo} | {hi} | {_fmt(o.default)} | {o.description} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def update(path) -> None:
    """Replace the generated block of `path` (docs/costing.md) with `render()`."""
    from pathlib import Path

    p = Path(path)
    text = p.read_text()
    a, b = text.index(BEGIN), text.index(END) + len(END)
    p.write_text(text[:a] + render() + text[b:])


if __name__ == "__main__":
    import sys
    from pathlib import Path

    update(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "docs" / "costing.md")
