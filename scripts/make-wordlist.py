#!/usr/bin/env python3
"""Makes Sempere's join word list (version 1): exactly 2048 words, 11 bits each.

The list is released: it must never change. This script is kept so anyone can see, and re-run, how it
was made. docs/sempere-join-words.md explains the rules and why; they are, in order:

  1. Source: Debian's wamerican-small 2020.12.07-2 (/usr/share/dict/american-english-small, SCOWL size
     35, the most common American English forms), SHA-256 pinned below.
  2. Keep a line only if it is 4 to 8 lowercase ASCII letters a-z. This drops proper nouns (they are
     capitalised), possessives and contractions (apostrophes), accented words, and words too short to
     tell apart or too long to type.
  3. Drop a word that starts with a stem in BLOCKLIST (offensive, sexual or violent words; the stem
     also removes innocent words such as "hello" or "cockpit": the list loses nothing it needs).
  4. Drop inflected forms whose base is in the source: plurals and verbs in -s/-es, past tenses in
     -d/-ed (and doubled consonant + -ed), and -ing forms (with -e restored, or a doubled consonant).
     The six words should read as plain base words.
  5. Group the remaining words by their first four letters. Each group gives one word: its shortest,
     then the first alphabetically. So every word is identified by its first four letters: a typist
     may stop there (JoinWords accepts any unique prefix of at least four letters, and shorter ones
     when unique).
  6. Rank the groups by how many words of step 2 share the prefix (most first: a prefix that starts
     many common words is a common root), ties broken by SHA-256 of the prefix (so no part of the
     alphabet is favoured), and keep the first 2048.
  7. Sort the 2048 words by byte order (which is alphabetical for a-z). Word i encodes the 11-bit
     value i.

Usage:
  scripts/make-wordlist.py           write Sources/Sempere/JoinWordList.swift and docs/sempere-join-words-v1.txt
  scripts/make-wordlist.py --check   check the committed list against the rules, and, when the source
                                     file is the pinned one, that re-running the rules gives it exactly
"""

import hashlib
import os
import re
import sys

SOURCE = "/usr/share/dict/american-english-small"
SOURCE_PACKAGE = "wamerican-small 2020.12.07-2"
SOURCE_SHA256 = "a6e2bc32526c38fa082ffbdb527ad9999e41b0a712d06e8415244068454d4d55"
COUNT = 2048
MIN_LENGTH, MAX_LENGTH = 4, 8
PREFIX_LENGTH = 4

# Step 3: a word starting with any of these is dropped. Kept small and stated, not exhaustive.
BLOCKLIST = sorted(
    """
    anal anus arse bastard bitch bomb boob butt cock condom crap cunt damn dead death dick dildo drug
    drunk dyke fag fart fuck gay hell homo horny kill kike lust murder nazi nigger nude orgasm penis
    piss porn pussy racist rape rapist rectal rectum retard sex shit slave slut sperm suicide terror
    tits torture twat vagina whore
    """.split()
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWIFT_OUT = os.path.join(ROOT, "Sources", "Sempere", "JoinWordList.swift")
TEXT_OUT = os.path.join(ROOT, "docs", "sempere-join-words-v1.txt")

WORD = re.compile(r"[a-z]{%d,%d}" % (MIN_LENGTH, MAX_LENGTH))


def bases(word):
    """The words `word` could be an inflection of (step 4)."""
    out = []
    if word.endswith("s"):
        out += [word[:-1]]
        if word.endswith("es"):
            out += [word[:-2]]
    if word.endswith("ed"):
        out += [word[:-1], word[:-2]]
        if len(word) >= 4 and word[-3] == word[-4]:
            out += [word[:-3]]
    if word.endswith("ing"):
        out += [word[:-3], word[:-3] + "e"]
        if len(word) >= 5 and word[-4] == word[-5]:
            out += [word[:-4]]
    return [b for b in out if len(b) >= 2]


def make(lines):
    """Applies steps 2 to 7 to the lines of the source; returns the sorted list."""
    everything = {line for line in lines if re.fullmatch(r"[a-z]+", line)}
    candidates = sorted({line for line in lines if WORD.fullmatch(line)})  # step 2
    family = {}
    for word in candidates:
        family[word[:PREFIX_LENGTH]] = family.get(word[:PREFIX_LENGTH], 0) + 1
    kept = [w for w in candidates if not any(w.startswith(stem) for stem in BLOCKLIST)]  # step 3
    kept = [w for w in kept if not any(b in everything for b in bases(w))]  # step 4
    groups = {}
    for word in kept:  # step 5
        prefix = word[:PREFIX_LENGTH]
        best = groups.get(prefix)
        if best is None or (len(word), word) < (len(best), best):
            groups[prefix] = word
    ranked = sorted(groups, key=lambda p: (-family[p], hashlib.sha256(p.encode()).hexdigest()))  # step 6
    if len(ranked) < COUNT:
        sys.exit(f"make-wordlist: only {len(ranked)} groups, need {COUNT}")
    return sorted(groups[p] for p in ranked[:COUNT])  # step 7


def check_rules(words):
    """The rules any released list must keep; returns a list of problems."""
    problems = []
    if len(words) != COUNT:
        problems.append(f"{len(words)} words, want {COUNT}")
    if words != sorted(set(words)):
        problems.append("not sorted, or has duplicates")
    for word in words:
        if not WORD.fullmatch(word):
            problems.append(f"{word!r} is not {MIN_LENGTH}-{MAX_LENGTH} letters a-z")
        if any(word.startswith(stem) for stem in BLOCKLIST):
            problems.append(f"{word!r} starts with a blocked stem")
    prefixes = [w[:PREFIX_LENGTH] for w in words]
    if len(set(prefixes)) != len(prefixes):
        problems.append("two words share their first four letters")
    return problems


def text(words):
    return "".join(w + "\n" for w in words)


def swift(words):
    body = text(words)
    digest = hashlib.sha256(body.encode()).hexdigest()
    return (
        "// Generated by scripts/make-wordlist.py from Debian's " + SOURCE_PACKAGE + ". Do not edit:\n"
        "// the list is released and must never change (docs/sempere-join-words.md).\n"
        "// SHA-256 of the words, one per line, each ended by \\n: " + digest + "\n"
        "\n"
        "extension JoinWords {\n"
        "    /// Version 1 of the join word list: " + str(COUNT) + " words, sorted, word i encoding the 11-bit value i.\n"
        "    static let listText = \"\"\"\n" + "".join("        " + w + "\n" for w in words) + "        \"\"\"\n"
        "}\n"
    )


def main():
    check = "--check" in sys.argv[1:]
    with open(SOURCE, "rb") as f:
        raw = f.read()
    source_matches = hashlib.sha256(raw).hexdigest() == SOURCE_SHA256
    lines = [line.strip() for line in raw.decode("utf-8").splitlines()]
    if not check:
        if not source_matches:
            sys.exit(f"make-wordlist: {SOURCE} is not {SOURCE_PACKAGE}: the released list is never regenerated")
        words = make(lines)
        problems = check_rules(words)
        if problems:
            sys.exit("make-wordlist: " + "; ".join(problems))
        with open(TEXT_OUT, "w") as f:
            f.write(text(words))
        with open(SWIFT_OUT, "w") as f:
            f.write(swift(words))
        print(f"wrote {len(words)} words, sha256 {hashlib.sha256(text(words).encode()).hexdigest()}")
        return
    with open(TEXT_OUT) as f:
        committed = f.read().splitlines()
    problems = check_rules(committed)
    with open(SWIFT_OUT) as f:
        if f.read() != swift(committed):
            problems.append(f"{SWIFT_OUT} does not hold the words of {TEXT_OUT}")
    if source_matches:
        if make(lines) != committed:
            problems.append(f"re-running the rules on {SOURCE} does not give the committed list")
        verdict = "rules hold, and re-running them on the pinned source gives the committed list"
    else:
        verdict = f"rules hold; {SOURCE} is not {SOURCE_PACKAGE}, so the list was not regenerated"
    if problems:
        sys.exit("make-wordlist --check: " + "; ".join(problems))
    print(verdict)


if __name__ == "__main__":
    main()
