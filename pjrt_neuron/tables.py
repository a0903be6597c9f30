"""The one table formatter of the command line: `ls`, `cache ls`, `selftest`, `estimate` and `plan`
print their tables through it, so columns line up the same way everywhere."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    title: str = ""
    align: str = "<"  # "<" left, ">" right
    min_width: int = 0


def format_table(columns: list[Column], rows: list[list[str]], *, indent: str = "", gap: str = " ",
                 header: bool = True, boxed: bool = False) -> list[str]:
    """The table's lines: each column as wide as its widest cell (or title), trailing blanks cut.
    `boxed` draws neuron-ls's rules and bars around left-aligned cells."""
    titled = [[c.title for c in columns]] if header else []
    widths = [max([c.min_width, *(len(r[i]) for r in titled + rows)]) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        padded = [cell.rjust(w) if c.align == ">" else cell.ljust(w) for c, cell, w in zip(columns, cells, widths)]
        if boxed:
            return indent + "| " + " | ".join(padded) + " |"
        return (indent + gap.join(padded)).rstrip()

    if not boxed:
        return [line(r) for r in titled + rows]
    rule = indent + "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    return [rule, *(line(r) for r in titled), *([rule] if titled else []), *(line(r) for r in rows), rule]
