"""The pieces of `python -m tts.benchmark` (the CLI entry point is tts/benchmark.py).

    texts    -- the sentence pool and texts of a given symbol length
    timing   -- timers, medians, cuda sync, device checks, machine facts
    cold_start -- `tts.benchmark cold-start`: the CLI's start-up wall time and peak memory, fresh processes
    onnx_speed -- `tts.benchmark onnx`: ONNX export vs eager torch, parity and speed at 1 and 2 threads
    systems  -- building/loading the AR/NAR/vocoder systems, random models, forced lengths
    memory   -- the peak-memory probe (a fresh `python -m tts.benchmark --memory-probe` subprocess per system)
    measure  -- the benchmark itself: latency, vocoder, end-to-end, first audio, throughput, memory
    peers    -- Festival and SpeechBrain peers
    report   -- markdown and plots
"""
