"""Rebuild persuasion.txt from the NLTK Gutenberg copy in ../shared/data/haystack/ (run once).

The NLTK copy is tokenized Treebank-style ("Sir Walter Elliot , of Kellynch Hall ,", ``quotes'')
with one sentence per line. We undo the tokenization so the filler reads like the book, and
keep one sentence per line. Usage: python assets/haystack/prepare.py
"""

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[2] / "shared" / "data" / "haystack" / "gutenberg_nltk" / "austen-persuasion.txt"


def detokenize(line: str) -> str:
    line = re.sub(r"``\s*", '"', line)
    line = re.sub(r"\s*''", '"', line)
    line = re.sub(r"`\s*", "'", line)
    line = re.sub(r"\s+([,.;:!?)\]])", r"\1", line)
    line = re.sub(r"([(\[])\s+", r"\1", line)
    line = re.sub(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1", line, flags=re.IGNORECASE)
    line = re.sub(r'"\s+([^"]*?)\s+"', r'"\1"', line)
    return re.sub(r"\s+", " ", line).strip()


def main():
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    # Drop the "[ Persuasion by Jane Austen 1818 ]" banner and chapter headings.
    body = [detokenize(line) for line in lines[1:]
            if line.strip() and not re.match(r"^Chapter \d+$", line.strip())]
    (HERE / "persuasion.txt").write_text("\n".join(body) + "\n", encoding="utf-8")
    print(f"wrote {len(body)} lines")


if __name__ == "__main__":
    main()
