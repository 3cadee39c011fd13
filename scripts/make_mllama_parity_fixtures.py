#!/usr/bin/env python3
"""Writes the Llama 3.2 Vision logits-parity fixture under recipes/checkpoint/testdata/mllama_parity/.

Builds transformers' MllamaForConditionalGeneration at the sizes of the tiny preset tiny_llama3_2_vision
(recipes/models/vision_model.cc: 28-pixel tiles of 7-pixel patches, up to 4 tiles, 3 CLIP layers keeping layers 1
and 3, 2 global layers; a 4-layer text decoder, vocab 512, with cross-attention layers before its layers 2 and 4,
i.e. transformers' layers 1 and 4 of 6), redraws every parameter, saves it with save_pretrained, runs two samples
with one image each through it in float32 with eager attention, and saves the inputs and logits to
expected.safetensors. recipes/checkpoint/hf_vision_test.cc loads the folder and compares.

The tile tables: transformers holds one row per supported aspect ratio, Meta's reference and torchtune one entry
per grid tile, of which transformers' rows are copies. A published checkpoint is therefore consistent across
ratios; the fixture draws the grid tables and writes the rows from them, as a real checkpoint holds them. Every
gate is set away from zero so that the tile embeddings and the cross-attention layers change the logits.

Sample 0 is a 2 x 2 image, sample 1 a 1 x 2 image (two padding tiles); the image token is the first token, so every
text position sees the image (transformers zeroes only the MLP branch of a position that sees none, Meta's
reference and torchtune both branches).

transformers 4.57.6's MllamaVisionEncoder records each layer's output as hidden state i, so its
intermediate_layers_indices pick the outputs of layers 3, 7, ... where Meta's reference, torchtune and transformers
before its output-recording refactor pick their inputs (transformers PR #39785 restores that). The script runs the
encoder the reference's way (reference_encoder_forward) so the fixture holds the published model's function.

Made once and committed. Needs Python 3.11 with torch==2.11.0 (CPU), transformers==4.57.6, safetensors==0.8.0,
numpy; e.g. python3 -m venv /tmp/mllama-venv && /tmp/mllama-venv/bin/pip install torch==2.11.0
transformers==4.57.6 safetensors==0.8.0 numpy && /tmp/mllama-venv/bin/python scripts/make_mllama_parity_fixtures.py
(--generation: the greedy-generation fixture, generation.safetensors, from the committed model; --images: the
image transform's.)
"""

import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file

PINNED = {"torch": "2.11.0", "transformers": "4.57.6"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "checkpoint", "testdata",
                   "mllama_parity")
VOCAB, TILES, TILE, PATCH, WIDTH = 512, 4, 28, 7, 16
TOKENS = (TILE // PATCH) ** 2 + 1
SEQ = 10
SAMPLES = [(2, 2), (1, 2)]


def config():
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}
    text = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=4,
                num_key_value_heads=2, cross_attention_layers=[1, 4], rope_theta=500000.0, rope_scaling=rope,
                rms_norm_eps=1e-5, max_position_embeddings=512, tie_word_embeddings=False, pad_token_id=None)
    vision = dict(hidden_size=WIDTH, num_hidden_layers=3, num_global_layers=2, attention_heads=2,
                  intermediate_size=4 * WIDTH, image_size=TILE, patch_size=PATCH, max_num_tiles=TILES,
                  intermediate_layers_indices=[1, 3], vision_output_dim=3 * WIDTH, norm_eps=1e-5)
    cfg = transformers.MllamaConfig(text_config=text, vision_config=vision, image_token_index=VOCAB)
    cfg._attn_implementation = "eager"
    cfg.torch_dtype = "float32"
    return cfg


def supported_ratios():
    return [(h, w) for h in range(1, TILES + 1) for w in range(1, TILES + 1) if h * w <= TILES]


def ratio_rows(grid):
    """Grid table [T, T, n, D] -> transformers' rows [ratios + 1, T * n * D] (row 0 and unused tiles zero)."""
    n, d = grid.shape[2], grid.shape[3]
    rows = torch.zeros(len(supported_ratios()) + 1, TILES, n, d)
    for i, (h, w) in enumerate(supported_ratios()):
        for t in range(h * w):
            rows[i + 1, t] = grid[t // w, t % w]
    return rows.reshape(len(supported_ratios()) + 1, -1)


def randomize(model, g):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "gate" in name and p.numel() == 1:
                p.copy_(0.4 + 0.6 * torch.rand(p.shape, generator=g))
            elif "embed_tokens" in name or "embedding" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(1.5 * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        vision = model.model.vision_model
        for module, n in ((vision.pre_tile_positional_embedding, 1), (vision.post_tile_positional_embedding, 1)):
            module.embedding.weight.copy_(ratio_rows(0.5 * torch.randn(TILES, TILES, n, WIDTH, generator=g)))
        vision.gated_positional_embedding.tile_embedding.weight.copy_(
            ratio_rows(0.5 * torch.randn(TILES, TILES, TOKENS, WIDTH, generator=g)))


def inputs(g):
    ids = torch.randint(0, VOCAB, (len(SAMPLES), SEQ), generator=g)
    ids[:, 0] = VOCAB
    pixels = torch.zeros(len(SAMPLES), 1, TILES, 3, TILE, TILE)
    ratio_ids = torch.zeros(len(SAMPLES), 1, dtype=torch.long)
    ratio_mask = torch.zeros(len(SAMPLES), 1, TILES, dtype=torch.long)
    cross = torch.zeros(len(SAMPLES), SEQ, 1, TILES, dtype=torch.long)
    for i, (h, w) in enumerate(SAMPLES):
        pixels[i, 0, :h * w] = torch.randn(h * w, 3, TILE, TILE, generator=g)
        ratio_ids[i, 0] = supported_ratios().index((h, w)) + 1
        ratio_mask[i, 0, :h * w] = 1
        cross[i, :, 0, :h * w] = 1
    return ids, pixels, ratio_ids, ratio_mask, cross


def reference_encoder_forward(self, hidden_states, attention_mask=None):
    """MllamaVisionEncoder.forward keeping each layer's input (index i: the input of layer i; the last: the output)."""
    states = ()
    for layer in self.layers:
        states = states + (hidden_states,)
        hidden_states = layer(hidden_state=hidden_states, attention_mask=attention_mask)
    states = states + (hidden_states,)
    return transformers.modeling_outputs.BaseModelOutput(last_hidden_state=hidden_states, hidden_states=states)


def main():
    for package, version in PINNED.items():
        found = getattr(sys.modules[package], "__version__").split("+")[0]
        if found != version:
            sys.exit(f"{package} {found} found; the fixture is made with {version} (see the docstring)")
    transformers.models.mllama.modeling_mllama.MllamaVisionEncoder.forward = reference_encoder_forward
    g = torch.Generator().manual_seed(2054)
    model = transformers.MllamaForConditionalGeneration(config()).float().eval()
    randomize(model, g)
    ids, pixels, ratio_ids, ratio_mask, cross = inputs(g)
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pixels, aspect_ratio_ids=ratio_ids, aspect_ratio_mask=ratio_mask,
                       cross_attention_mask=cross).logits.float()
        text_only = model(input_ids=ids[:, 1:]).logits.float()
    shutil.rmtree(OUT, ignore_errors=True)
    model.save_pretrained(OUT, safe_serialization=True)
    gen = os.path.join(OUT, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    encoder_mask = cross.repeat_interleave(TOKENS, dim=3).reshape(len(SAMPLES), SEQ, -1).to(torch.uint8)
    save_file({"input_ids": ids.contiguous(), "images": pixels.contiguous(),
               "aspect_ratio": torch.tensor(SAMPLES, dtype=torch.long).view(len(SAMPLES), 1, 2).contiguous(),
               "encoder_mask": encoder_mask.contiguous(), "logits": logits.contiguous(),
               "text_only_logits": text_only.contiguous()},
              os.path.join(OUT, "expected.safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})
    size = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{model.num_parameters()} params, |logits| <= {logits.abs().max():.2f}, "
          f"image changes logits by {(logits[:, 1:] - text_only).abs().max():.2f}, {size / 1024:.0f} KiB")


if __name__ == "__main__" and "--images" not in sys.argv and "--generation" not in sys.argv:
    main()


# ----- Greedy generation: transformers' generate on the committed model, with and without the image -----

NEW_TOKENS = 8


def generation_fixture():
    """Sample 0's prompt (its image token first) greedily continued by NEW_TOKENS tokens through transformers'
    generate (KV caches, the cross-attention mask's last row repeated for each new token), and the same prompt
    without its image token and image. Written to generation.safetensors beside the model."""
    transformers.models.mllama.modeling_mllama.MllamaVisionEncoder.forward = reference_encoder_forward
    model = transformers.MllamaForConditionalGeneration.from_pretrained(OUT, attn_implementation="eager").float().eval()
    ids, pixels, ratio_ids, ratio_mask, cross = inputs(torch.Generator().manual_seed(2054 + 1))
    ids, pixels, ratio_ids, ratio_mask, cross = ids[:1], pixels[:1], ratio_ids[:1], ratio_mask[:1], cross[:1]
    common = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None,
                  pad_token_id=0)
    with torch.no_grad():
        image = model.generate(input_ids=ids, pixel_values=pixels, aspect_ratio_ids=ratio_ids,
                               aspect_ratio_mask=ratio_mask, cross_attention_mask=cross, **common)[:, SEQ:]
        text = model.generate(input_ids=ids[:, 1:], **common)[:, SEQ - 1:]
    save_file({"input_ids": ids.contiguous(), "images": pixels.contiguous(),
               "aspect_ratio": torch.tensor(SAMPLES[:1], dtype=torch.long).view(1, 1, 2).contiguous(),
               "image_tokens": image.contiguous(), "text_tokens": text.contiguous()},
              os.path.join(OUT, "generation.safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})
    print(f"with the image {image.tolist()}, without {text.tolist()}")


if __name__ == "__main__" and "--generation" in sys.argv:
    generation_fixture()


# ----- The image transform: transformers' MllamaImageProcessor on small PPM images -----

IMAGE_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recipes", "data", "testdata",
                         "mllama_image")
# (height, width): exactly 1 x 2 tiles (no resize), smaller than a tile (upscaled), tall (downscaled to 4 x 1), wide
# and odd (downscaled), a square that fits 2 x 2.
IMAGE_SIZES = [(28, 56), (20, 13), (150, 30), (33, 101), (50, 50)]


def write_ppm(path, pixels):
    h, w, _ = pixels.shape
    with open(path, "wb") as f:
        f.write(f"P6\n{w} {h}\n255\n".encode())
        f.write(pixels.astype("uint8").tobytes())


def image_fixtures():
    import json
    import numpy as np
    from PIL import Image
    # The published checkpoints' preprocessor_config.json: CLIP's mean and std (the class defaults are 0.5).
    processor = transformers.MllamaImageProcessor(size={"height": TILE, "width": TILE}, max_image_tiles=TILES,
                                                  image_mean=[0.48145466, 0.4578275, 0.40821073],
                                                  image_std=[0.26862954, 0.26130258, 0.27577711])
    shutil.rmtree(IMAGE_OUT, ignore_errors=True)
    os.makedirs(IMAGE_OUT)
    rng = np.random.default_rng(54)
    cases = []
    for i, (h, w) in enumerate(IMAGE_SIZES):
        # Smooth gradients plus noise, so resampling errors show but stay small.
        y, x = np.mgrid[0:h, 0:w]
        pixels = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1), 128 + 60 * np.sin(x / 3.0 + y / 5.0)], -1)
        pixels = np.clip(pixels + rng.normal(0, 20, pixels.shape), 0, 255).round()
        name = f"image{i}_{h}x{w}"
        write_ppm(os.path.join(IMAGE_OUT, name + ".ppm"), pixels)
        out = processor(images=[[Image.fromarray(pixels.astype("uint8"))]], return_tensors="np")
        ratio = out["aspect_ratio_ids"][0, 0]
        rows, cols = supported_ratios()[ratio - 1]
        tiles = out["pixel_values"][0, 0, :rows * cols].astype("<f4")
        tiles.tofile(os.path.join(IMAGE_OUT, name + ".f32"))
        cases.append({"name": name, "height": h, "width": w, "rows": rows, "cols": cols})
    with open(os.path.join(IMAGE_OUT, "expected.json"), "w") as f:
        json.dump({"tile_size": TILE, "max_num_tiles": TILES, "transformers": transformers.__version__,
                   "cases": cases}, f, indent=1)
    print(f"{len(cases)} images: {[(c['rows'], c['cols']) for c in cases]} tile grids")


if __name__ == "__main__" and "--images" in sys.argv:
    image_fixtures()
