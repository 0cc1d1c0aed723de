# Retrieval Lab image. Default: CUDA runtime with the `gpu` extra (faiss-gpu); the CPU variant:
#   docker build --build-arg BASE=python:3.11.7-slim-bookworm --build-arg EXTRAS=dev -t retrieval-lab:cpu .
# GPU usage (needs the NVIDIA container toolkit on the host):
#   docker build -t retrieval-lab:cuda .
#   docker run --gpus all -v "$PWD:/work" retrieval-lab:cuda            # runs `dvc repro`
ARG BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${BASE}

ARG EXTRAS=dev,gpu
ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 DVC_NO_ANALYTICS=1

# Python 3.11 from deadsnakes on the CUDA base; the slim Python base already has it (and its headers). gcc and
# libc6-dev: the install compiles BM25's loop (src/retrieval_lab/retrievers/_bm25_kernel.c).
RUN if ! command -v python3.11 >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends software-properties-common git gcc libc6-dev \
      && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update \
      && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev \
      && rm -rf /var/lib/apt/lists/*; \
    else apt-get update && apt-get install -y --no-install-recommends git gcc libc6-dev \
      && rm -rf /var/lib/apt/lists/*; fi

WORKDIR /work
COPY . /work
# The README's install step (torch stays pinned to 2.13.0: pip resolves the CUDA wheel on Linux).
RUN python3.11 -m venv .venv && .venv/bin/pip install -q -e ".[${EXTRAS}]"
ENV PATH=/work/.venv/bin:$PATH
ENTRYPOINT ["dvc", "repro"]
