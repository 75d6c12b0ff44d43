"""The sentence encoder and what it is made of: backbones (backbones), a model folder read from its files
(folder), tokens and their cache (tokens), prompts (prompts), pooling (pooling, pooling_names), the encoder
(encoder), LoRA and QLoRA adapters (lora), sentence-transformers files (interop), embedding a text file
(embed), published checkpoints (released).

May import: ``aoe.util``, ``aoe.data``, ``aoe.config``.
"""
