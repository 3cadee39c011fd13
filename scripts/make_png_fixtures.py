#!/usr/bin/env python3
"""Writes the PNG decoder's fixtures under recipes/data/testdata/png/: small images saved as PNG by Pillow (its
adaptive filter choice, so rows use several of PNG's five filters) in each colour type tune-matrix reads (RGB,
RGBA, grey, grey with alpha, palette), beside <name>.ppm: the same image as Pillow's convert("RGB") gives it, which
is what torchtune's image loading hands its transform. recipes/data/png_test.cc compares the two.

Made once and committed. Needs Pillow and numpy, e.g. the throw-away venv of make_mllama_parity_fixtures.py.
"""
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "data", "testdata", "png")


def pixels(h, w, channels, rng):
    """Smooth gradients with noise: neighbouring rows and pixels alike, so the filters matter."""
    y, x = np.mgrid[0:h, 0:w]
    base = [255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1), 128 + 60 * np.sin(x / 3.0 + y / 5.0), 200 - x - y]
    out = np.stack(base[:channels], -1) + rng.normal(0, 12, (h, w, channels))
    return np.clip(out, 0, 255).round().astype("uint8")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(54)
    cases = {
        "rgb": Image.fromarray(pixels(23, 37, 3, rng), "RGB"),
        "rgba": Image.fromarray(pixels(19, 16, 4, rng), "RGBA"),
        "grey": Image.fromarray(pixels(17, 29, 1, rng)[:, :, 0], "L"),
        "grey_alpha": Image.fromarray(pixels(12, 9, 2, rng), "LA"),
        "palette": Image.fromarray(pixels(21, 18, 3, rng), "RGB").quantize(colors=40),
    }
    for name, image in cases.items():
        image.save(os.path.join(OUT, name + ".png"), optimize=True)
        rgb = np.asarray(Image.open(os.path.join(OUT, name + ".png")).convert("RGB"))
        h, w, _ = rgb.shape
        with open(os.path.join(OUT, name + ".ppm"), "wb") as f:
            f.write(f"P6\n{w} {h}\n255\n".encode() + rgb.tobytes())
    print(f"{len(cases)} PNG fixtures in {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
