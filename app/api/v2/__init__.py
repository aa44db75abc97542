"""The KServe / Triton V2 inference protocol: its messages, routes, binary tensor extension and the inference itself."""
