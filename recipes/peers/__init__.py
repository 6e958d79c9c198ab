"""The lab's peers: other systems and libraries measured beside ours (never imported by the product).

    piper        -- Piper (VITS, ONNX) en_US joe-medium, a peer in recipes.evaluate and recipes.benchmark
    measure_nemo -- our normaliser against NVIDIA's nemo-text-processing on NeMo's English test cases
    nemo_worker  -- the script measure_nemo runs inside NeMo's own venv
"""
