"""The command line every timing benchmark shares: ``--repeats N`` timed runs per case, the best reported."""

from __future__ import annotations

import argparse


def parse_repeats(description: str) -> int:
    """``--repeats`` from the command line (default 3), refused below 1 in argparse's one line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per case (best reported; default 3)")
    repeats = parser.parse_args().repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    return repeats
