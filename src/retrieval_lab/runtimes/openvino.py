"""The encoder's network converted from torch by OpenVINO and compiled for this CPU (``dense.runtime:
openvino``; the ``openvino`` extra).

Nothing is exported to disk: ``openvino.convert_model`` traces the loaded (verified) torch model in memory, with
the batch and token dimensions left dynamic. Precision: ``bf16`` compiles with OpenVINO's bf16 inference
precision (on a CPU with AVX512-BF16 or AMX; elsewhere OpenVINO keeps f32), else f32 throughout. Pooling and
normalisation run in float32 NumPy, as the torch path does them in float32. Batches go through an asynchronous
queue, so the next batch is tokenised while the CPU runs the previous one; each batch is one independent
inference, so the rows do not depend on which request ran it (the same bytes on every run, on one machine).
Speed and nDCG@10 against torch and sentence-transformers' backends: docs/lab-notes.md (scripts/bench_encode.py).

OpenVINO (on import and on each conversion) and NNCF send usage events to Google Analytics, and keep a client id
under ``~/intel``, unless the user opted out with ``opt_in_out --opt_out``; :func:`without_telemetry` keeps the
commands from sending or writing anything of the kind.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings

import numpy as np

from ..core.errors import InputError

# requests in flight: one running while the next batch is tokenised (more would only hold more activations)
_IN_FLIGHT = 2
# OpenVINO's CPU streams: 1 runs each batch on all the threads (2 streams of one thread each measured level)
_STREAMS = 1
# int8: the inputs of each int8 layer quantised at run time in groups of this many values. Chosen on SciFact
# validation (lab notes, 2026-12-05): the largest of 32 / 128 / 384 within 0.002 nDCG@10 of fp32 (384, a whole
# row per scale, lost 0.0048)
INT8_GROUP = 128
CALIBRATION_TOKENS = 256  # static int8: each calibration text cut here (dense.max_seq_length's default)


class CompiledEncoder:
    def __init__(self, compiled, tokenizer, input_names: list[str], dim: int, precision: str):
        self.compiled, self.tokenizer, self.input_names, self.dim = compiled, tokenizer, input_names, dim
        self.precision = precision  # the inference precision OpenVINO compiled for: bf16 or f32

    def encode(self, texts: list[str], batch_size: int, max_length: int) -> tuple[np.ndarray, int]:
        """``float32 [len(texts), H]`` unit rows in input order (longest texts batched first, as torch's path
        batches them), and how many texts were cut at ``max_length`` tokens."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        truncated = 0
        requests = [self.compiled.create_infer_request() for _ in range(_IN_FLIGHT)]
        waiting: list = [None] * _IN_FLIGHT  # per request: (rows, attention mask) of the batch it runs

        def finish(slot: int) -> None:
            requests[slot].wait()
            rows, mask = waiting[slot]
            out[rows] = _mean_pool_normalised(requests[slot].get_output_tensor(0).data, mask)
            waiting[slot] = None

        for number, start in enumerate(range(0, len(texts), batch_size)):
            rows = order[start:start + batch_size]
            batch = self.tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=max_length,
                                   return_tensors="np")
            truncated += sum(1 for enc in batch.encodings if enc.overflowing)
            slot = number % _IN_FLIGHT
            if waiting[slot] is not None:
                finish(slot)
            requests[slot].start_async([np.ascontiguousarray(batch[name], dtype=np.int64) for name in self.input_names])
            waiting[slot] = (rows, batch["attention_mask"])
        for slot in range(_IN_FLIGHT):
            if waiting[slot] is not None:
                finish(slot)
        return out, truncated


def without_telemetry() -> None:
    """Make ``openvino_telemetry`` unimportable in this process, before OpenVINO or NNCF is imported: both then use
    their own stand-ins, which send nothing and write nothing under the home folder. A process that imported
    OpenVINO before retrieval-lab did keeps what that import set up (every command imports it here first)."""
    sys.modules.setdefault("openvino_telemetry", None)  # None: `import openvino_telemetry` raises ImportError


def _nncf(runtime: str):
    without_telemetry()
    try:
        import nncf
    except ImportError:
        raise InputError(f"dense.runtime {runtime} needs the nncf package: pip install 'retrieval-lab[openvino]'",
                         field="dense.runtime") from None
    return nncf


@contextlib.contextmanager
def _at_error(logger):
    """``logger`` says only errors for the duration."""
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _quiet():
    """NNCF's summary table and progress bars off stdout, where commands print their report."""
    from nncf.common.logging import nncf_logger

    with _at_error(nncf_logger), contextlib.redirect_stdout(io.StringIO()):
        yield


def _int8_weights(network):
    nncf = _nncf("openvino_int8")
    with _quiet():
        return nncf.compress_weights(network, mode=nncf.CompressWeightsMode.INT8_ASYM)


def _int8_static(network, inputs: list[list[np.ndarray]]):
    """Every linear layer and matmul in int8, weights and activations, at scales NNCF calibrates on ``inputs`` (one
    text each): its transformer scheme (attention's softmax and layer norms kept in float), asymmetric activations,
    biases corrected; the calibration optimum-intel's static quantisation runs (its defaults)."""
    nncf = _nncf("openvino_int8_static")
    with _quiet():
        return nncf.quantize(network, nncf.Dataset(inputs), model_type=nncf.ModelType.TRANSFORMER,
                             preset=nncf.QuantizationPreset.MIXED, subset_size=len(inputs))


def _mean_pool_normalised(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """e = u / |u|, u = sum_t m_t h_t / sum_t m_t: the pooling of encoder.py in float32."""
    weights = mask[..., None].astype(np.float32)  # [b, T, 1]
    summed = (hidden * weights).sum(axis=1)  # [b, H]
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)  # [b, H]
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def compile(encoder, bf16: bool, threads: int, int8: bool = False,
            calibration: list[str] | None = None) -> CompiledEncoder:
    """``encoder``'s network (its weights as they are now) compiled by OpenVINO for the CPU, ``threads`` threads.
    ``int8``: the linear layers' weights compressed to int8 (NNCF's data-free weight compression, asymmetric, one
    scale per output channel) and their inputs quantised at run time by OpenVINO's CPU plugin, in groups of
    INT8_GROUP values, so those layers multiply in int8 (VNNI / AMX where the CPU has them); no calibration set,
    so the same texts give the same rows whatever was encoded before. ``calibration``: static int8 instead
    (:func:`_int8_static`), its scales calibrated on these texts, each cut at CALIBRATION_TOKENS (or the model's
    maximum)."""
    import torch
    from transformers.utils import logging as hf_logging

    without_telemetry()
    try:
        import openvino as ov
    except ImportError:
        raise InputError("dense.runtime openvino needs the openvino package: pip install 'retrieval-lab[openvino]'",
                         field="dense.runtime") from None
    if encoder.device.type != "cpu":
        raise InputError(f"dense.runtime openvino runs on the CPU; the encoder is on {encoder.device}: set "
                         "dense.device: cpu", field="dense.runtime")
    model = getattr(encoder.model, "module", encoder.model)
    sample = encoder.tokenizer(["a sample text to trace", "another"], padding=True, return_tensors="pt")
    names = list(sample.keys())

    class LastHidden(torch.nn.Module):  # the model's inputs by position, its last hidden state the one output
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs))).last_hidden_state  # [B, T, H]

    was_training = model.training
    model.eval()
    try:
        # the tracer reads every attribute of the model, its loss_function too, on which transformers warns on
        # stderr about a loss no encoder uses ("loss_type=None ... unrecognized"): a line about nothing, kept off
        with torch.no_grad(), warnings.catch_warnings(), _at_error(hf_logging.get_logger("transformers.modeling_utils")):
            warnings.simplefilter("ignore")  # the tracer's notes on Python control flow, about shapes it keeps dynamic
            network = ov.convert_model(LastHidden().eval(), example_input=tuple(sample[n] for n in names))
    finally:
        model.train(was_training)
    config = {"INFERENCE_NUM_THREADS": int(threads), "NUM_STREAMS": _STREAMS,
              "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"}
    if calibration is not None:
        tokens = min(CALIBRATION_TOKENS, getattr(model.config, "max_position_embeddings", CALIBRATION_TOKENS))
        inputs = [[np.ascontiguousarray(one[name], dtype=np.int64) for name in names] for one in
                  (encoder.tokenizer([text], truncation=True, max_length=tokens, return_tensors="np")
                   for text in calibration)]
        network = _int8_static(network, inputs)
    elif int8:
        network = _int8_weights(network)
        config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = INT8_GROUP
    compiled = ov.Core().compile_model(network, "CPU", config)
    precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
    return CompiledEncoder(compiled, encoder.tokenizer, names, encoder.dim, precision)
