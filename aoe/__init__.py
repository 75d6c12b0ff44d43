"""AoE / AnglE reproduction: angle-optimized text embeddings (Li & Li, ACL 2024)."""

import logging

__version__ = "0.1.0"


class _NoKernelsHubNotice(logging.Filter):
    """Drop bitsandbytes' import-time notice that the optional ``kernels`` package is missing.

    On CPUs with AVX512-BF16, importing bitsandbytes (peft and sentence-transformers import it,
    so every job does, a BERT one included) logs "Failed to load CPU gemm_4bit_forward ... pip
    install kernels". That kernel would only speed up the packed bf16 4-bit path, which our
    loaders never run (aoe.model.encoder.pin_4bit_cpu_path), and it is fetched from a hub at run time.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "gemm_4bit_forward" not in record.getMessage()


logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_NoKernelsHubNotice())
