#!/usr/bin/env python3
"""Writes recipes/data/testdata/phi3_torchtune_0_6_1.json: the ids torchtune 0.6.1's Phi3MiniTokenizer makes, which
recipes/data/chat_format_test.cc compares with tune-matrix's phi3_mini_tokenizer.

Why a second script: torchtune's Phi-3 rules changed after 0.6.1 (the release tune-matrix mirrors for Phi-3).
In 0.6.1, __call__ runs tokenize_messages with its default add_eos=False, so no <|endoftext|> follows an
assistant turn and truncation replaces no last token; encode(add_eos=True) appends the SentencePiece model's
own EOS (</s>), not <|endoftext|>. scripts/make_tokenizer_fixtures.py (torchtune bd2a0fc7c314) leaves Phi-3's
chat cases to this file.

Input: torchtune's test tokenizer model recipes/data/samples/tokenizers/m.model (tests/assets/m.model).
Pinned versions (Python 3.11): torchtune==0.6.1 sentencepiece==0.2.3 (torchtune imports torch, torchao, datasets
and omegaconf; the tokenizer never calls them). Run it once in a throw-away virtual environment outside the
checkout, e.g.:
    python3 -m venv /tmp/ref-venv
    /tmp/ref-venv/bin/pip install --no-deps torchtune==0.6.1 torchao==0.11.0
    /tmp/ref-venv/bin/pip install sentencepiece==0.2.3 datasets omegaconf torch
    /tmp/ref-venv/bin/python scripts/make_phi3_fixtures.py
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "recipes", "data", "samples", "tokenizers", "m.model")
OUT = os.path.join(ROOT, "recipes", "data", "testdata", "phi3_torchtune_0_6_1.json")

# Whitespace, numbers, code, emoji, CJK, and text that looks like special tokens (encoded as ordinary text).
CORPUS = [
    "Hello world!",
    "",
    " ",
    "\n",
    "  leading and trailing  ",
    "a  b   c\t\td\n\n\ne    \n  f   ",
    "1234567890 3.14159 -42 1,000,000 2024-06-01 0x1F",
    "def f(x):\n    return x**2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "I \u2764\ufe0f \U0001f999\U0001f525 family: \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\ud55c\uad6d\uc5b4",
    "<|user|>\nhi<|end|>\n<|assistant|>\nhello<|end|>\n<|endoftext|>",
    "<s>not a bos</s> <unk> <|system|> <|placeholder1|>",
    "caf\u00e9 na\u00efve \u2014 \u201cquotes\u201d \u2026",
]

CONVERSATIONS = {
    "single_turn": [
        ("user", "What is the meaning of life?"),
        ("assistant", "The meaning of life is 42."),
    ],
    "system_multi_turn": [
        ("system", "You are an AI assistant."),
        ("user", "What is the meaning of life?"),
        ("assistant", "The meaning of life is 42."),
        ("user", "That's ridiculous.\n\nReally?"),
        ("assistant", "I agree.  "),
    ],
    "corpus": [(("user", "assistant")[i % 2], t) for i, t in enumerate(CORPUS)],
}


def main():
    import sentencepiece
    import torchtune
    from torchtune.data import Message
    from torchtune.models.phi3 import phi3_mini_tokenizer

    tok = phi3_mini_tokenizer(MODEL)
    out = {
        "versions": {"torchtune": torchtune.__version__, "sentencepiece": sentencepiece.__version__},
        "model": "m.model",
        "bos_id": tok.bos_id, "eos_id": tok.eos_id, "pad_id": tok.pad_id,
        "encode": [{"text": t,
                    "ids": tok.encode(t, add_bos=False, add_eos=False),
                    "ids_with_bos_eos": tok.encode(t, add_bos=True, add_eos=True)} for t in CORPUS],
        "chat": [],
    }
    for max_seq_len in (None, 24, 9):
        tok = phi3_mini_tokenizer(MODEL, max_seq_len=max_seq_len)
        for name, turns in CONVERSATIONS.items():
            for train_on_input in (False, True):
                messages = [Message(role=role, content=text, masked=role != "assistant" and not train_on_input)
                            for role, text in turns]
                sample = tok({"messages": messages})  # what SFTDataset calls for a training sample
                out["chat"].append({
                    "conversation": name, "max_seq_len": max_seq_len,
                    "messages": [{"role": role, "content": text, "masked": role != "assistant" and not train_on_input}
                                 for role, text in turns],
                    "tokens": [int(t) for t in sample["tokens"]], "mask": [bool(m) for m in sample["mask"]]})
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
