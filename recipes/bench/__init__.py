"""The lab's measurements (the product, `tts`, never imports them): `python -m recipes.benchmark` and its
pieces, the load tests, the server harness they share with the tests, and the plots of results.

    texts    -- the sentence pool and texts of a given symbol length
    timing   -- timers, medians, cuda sync, device checks, machine facts
    cold_start -- `recipes.benchmark cold-start`: the CLI's start-up wall time and peak memory, fresh processes
    onnx_speed -- `recipes.benchmark onnx`: ONNX export vs eager torch, parity and speed at 1 and 2 threads
    blocks   -- `recipes.benchmark blocks`: the block-wise NAR's first audio and total time over block sizes
    document_memory -- peak memory of --stream over a growing document (`python -m recipes.bench.document_memory`)
    systems  -- building/loading the AR/NAR/vocoder systems, random models, forced lengths
    memory   -- the peak-memory probe (a fresh `python -m recipes.benchmark --memory-probe` subprocess per system)
    measure  -- the benchmark itself: latency, vocoder, end-to-end, first audio, throughput, memory
    peers    -- Festival, SpeechBrain and Piper (recipes.peers.piper) beside ours
    report   -- markdown and plots
    serve_loadtest     -- `python -m recipes.bench.serve_loadtest`: concurrent clients against `tts.serve`
    listening_loadtest -- `python -m recipes.bench.listening_loadtest`: simulated raters against `tts.listening`
    speech_server      -- a real `python -m tts.serve` on a free loopback port (the load test and the tests)
    tradeoff   -- `python -m recipes.bench.tradeoff`: quality against mel time, from recipes.evaluate reports
    val_losses -- `python -m recipes.bench.val_losses`: the last validation losses of training runs
"""
