#!/usr/bin/env python3
"""Writes the shipped dataset tune-matrix/tiny_vision (recipes/data/datasets/tune-matrix/tiny_vision): 12 PPM
images (4 colours x 3 shapes of a filled rectangle on black) and 36 records in the Cauldron's layout, each asking
one thing an image shows (its colour, its shape, or both). Standard library only; byte-for-byte deterministic.

    scripts/make_vision_dataset.py            # rewrite the folder
    scripts/make_vision_dataset.py --check    # exit 1 when the committed files differ from what this makes
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "data", "datasets", "tune-matrix",
                   "tiny_vision")
COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 60, 220), "yellow": (230, 220, 40)}
SHAPES = {"square": (24, 24), "wide": (40, 20), "tall": (20, 40)}


def ppm(width, height, rgb):
    """A filled rectangle with a 2-pixel black border."""
    rows = bytearray()
    for y in range(height):
        for x in range(width):
            inside = 2 <= x < width - 2 and 2 <= y < height - 2
            rows += bytes(rgb if inside else (0, 0, 0))
    return b"P6\n%d %d\n255\n" % (width, height) + bytes(rows)


def files():
    out = {}
    records = []
    for colour, rgb in COLOURS.items():
        for shape, (w, h) in SHAPES.items():
            name = f"images/{colour}_{shape}.ppm"
            out[name] = ppm(w, h, rgb)
            for user, assistant in (("What colour is the shape?", f"{colour.capitalize()}."),
                                    ("Is the shape square, wide or tall?", f"{shape.capitalize()}."),
                                    ("Describe the shape.", f"A {colour} {shape} one.")):
                records.append({"images": [name], "texts": [{"user": user, "assistant": assistant,
                                                             "source": "tune-matrix"}]})
    # Interleaved so a batch of consecutive records mixes questions and images.
    order = sorted(range(len(records)), key=lambda i: (i % 3, i // 3))
    out["train.json"] = (json.dumps([records[i] for i in order], indent=1) + "\n").encode()
    return out


def main():
    check = sys.argv[1:] == ["--check"]
    differ = []
    for name, data in files().items():
        path = os.path.join(OUT, name)
        if check:
            if not os.path.exists(path) or open(path, "rb").read() != data:
                differ.append(name)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    if differ:
        sys.exit("differ from what scripts/make_vision_dataset.py makes: " + ", ".join(differ))


if __name__ == "__main__":
    main()
