"""The page at `/`: type text, hear it.  It asks for pcm as server-sent events (stream_format "sse") and plays
each piece with Web Audio as it arrives (streaming playback), showing the words the events carry and
highlighting each while it is heard (its timing from the model's durations), then offers the whole as a wav in
an <audio> element (replay, download).  Its state is in #status's data-state (idle / loading / playing / done /
error), each word's in its data-state (waiting / current / spoken), for people and for the browser test."""

from __future__ import annotations

import html
import json

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tts: speech server</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
 textarea { width: 100%; box-sizing: border-box; font: inherit; padding: .5rem; }
 .row { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; margin: .75rem 0; }
 button { font: inherit; padding: .5rem 1.25rem; }
 #status[data-state=error] { color: #b00020; }
 audio { width: 100%; margin-top: .5rem; }
 small { color: #666; }
 #words { line-height: 1.8; min-height: 1.8em; }
 #words span { padding: 0 .1em; border-radius: .2em; }
 #words span[data-state=current] { background: #ffe08a; }
 #words span[data-state=spoken] { color: #555; }
</style></head>
<body>
<h1>Speech server</h1>
<p><small>Model <code>__MODEL__</code>, __RATE__ Hz. The audio plays as each sentence is made.</small></p>
<label for="text">Text (up to __MAXCHARS__ characters)</label>
<textarea id="text" rows="6" maxlength="__MAXCHARS__">Hello! This is the speech server. Each sentence plays as soon as it is made.</textarea>
<div class="row">
 <label for="voice">Voice <select id="voice">__VOICE_OPTIONS__</select></label>
 <label for="speed">Speed <input id="speed" type="number" min="__SMIN__" max="__SMAX__" step="0.05" value="1"></label>
 <button id="speak" type="button">Speak</button>
 <span id="status" data-state="idle" role="status">Ready.</span>
</div>
<p id="words" aria-live="off"></p>
<audio id="player" controls hidden></audio>
<script>
const CONFIG = __CONFIG__;
const statusEl = document.getElementById("status");
const button = document.getElementById("speak");
let ctx = null;

function setStatus(state, text) { statusEl.dataset.state = state; statusEl.textContent = text; }

function wavBlob(chunks, rate) {
  const n = chunks.reduce((a, c) => a + c.length, 0);
  const buf = new ArrayBuffer(44 + 2 * n), v = new DataView(buf);
  const str = (o, s) => { for (let i = 0; i < s.length; i++) v.setUint8(o + i, s.charCodeAt(i)); };
  str(0, "RIFF"); v.setUint32(4, 36 + 2 * n, true); str(8, "WAVE"); str(12, "fmt ");
  v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true); v.setUint32(24, rate, true);
  v.setUint32(28, 2 * rate, true); v.setUint16(32, 2, true); v.setUint16(34, 16, true); str(36, "data");
  v.setUint32(40, 2 * n, true);
  let o = 44;
  for (const c of chunks) for (let i = 0; i < c.length; i++, o += 2) v.setInt16(o, c[i], true);
  return new Blob([buf], {type: "audio/wav"});
}

// Word highlighting: each word's start/end (seconds of the answer) is mapped to the audio clock through the
// pieces as they were scheduled (piece k: its first sample's offset in the answer and its start on ctx's clock).
const wordsEl = document.getElementById("words");
let pieces = [], spans = [], raf = null;

function clockOf(seconds) {
  const sample = seconds * CONFIG.rate;
  let p = pieces[0];
  for (const q of pieces) { if (q.offset <= sample) p = q; else break; }
  return p ? p.at + (sample - p.offset) / CONFIG.rate : Infinity;
}

function highlight() {
  const now = ctx.currentTime;
  for (const s of spans) {
    const state = now >= clockOf(s.end) ? "spoken" : now >= clockOf(s.start) ? "current" : "waiting";
    if (s.el.dataset.state !== state) s.el.dataset.state = state;
  }
  const state = statusEl.dataset.state;
  const over = state === "error" || (state === "done" && spans.every(s => s.el.dataset.state === "spoken"));
  raf = over ? null : requestAnimationFrame(highlight);
}

function addWords(words) {
  for (const w of words) {
    const el = document.createElement("span");
    el.textContent = w.word; el.dataset.state = "waiting"; el.title = w.phones.join(" ");
    wordsEl.append(el, " ");
    spans.push({el, start: w.start_s, end: w.end_s});
  }
  if (raf === null) raf = requestAnimationFrame(highlight);
}

// the events of a text/event-stream body, one JSON object per "data:" line, as they arrive
async function* events(resp) {
  const reader = resp.body.getReader(), decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    text += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = text.indexOf("\\n\\n")) >= 0) {
      const block = text.slice(0, cut); text = text.slice(cut + 2);
      for (const line of block.split("\\n")) if (line.startsWith("data: ")) yield JSON.parse(line.slice(6));
    }
  }
}

function pcmOf(b64) {
  const bin = atob(b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Int16Array(bytes.buffer, 0, bytes.length >> 1);
}

async function speak() {
  const text = document.getElementById("text").value;
  const speed = parseFloat(document.getElementById("speed").value);
  button.disabled = true;
  setStatus("loading", "Making speech…");
  const t0 = performance.now();
  try {
    if (!ctx) ctx = new AudioContext({sampleRate: CONFIG.rate});
    await ctx.resume();
    const resp = await fetch("/v1/audio/speech", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({model: CONFIG.model, voice: document.getElementById("voice").value, input: text,
                            response_format: "pcm", stream_format: "sse", speed})});
    if (!resp.ok) {
      let message = resp.status + " " + resp.statusText;
      try { message = (await resp.json()).error.message; } catch (e) {}
      throw new Error(message);
    }
    const chunks = [];
    let at = ctx.currentTime + 0.05, samples = 0, firstMs = null, last = null;
    wordsEl.textContent = ""; pieces = []; spans = [];
    for await (const event of events(resp)) {
      if (event.type !== "speech.audio.delta") continue;
      const pcm = pcmOf(event.audio);
      if (!pcm.length) { if (event.words) addWords(event.words); continue; }
      chunks.push(pcm);
      const audio = ctx.createBuffer(1, pcm.length, CONFIG.rate), ch = audio.getChannelData(0);
      for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
      const src = ctx.createBufferSource();
      src.buffer = audio; src.connect(ctx.destination);
      at = Math.max(at, ctx.currentTime);
      src.start(at); pieces.push({offset: samples, at});
      at += audio.duration; samples += pcm.length; last = src;
      if (event.words) addWords(event.words);
      if (firstMs === null) firstMs = performance.now() - t0;
      setStatus("playing", "Playing… first audio after " + (firstMs / 1000).toFixed(2) + " s");
      statusEl.dataset.seconds = (samples / CONFIG.rate).toFixed(2);
    }
    if (!samples) throw new Error("the server sent no audio");
    const player = document.getElementById("player");
    player.src = URL.createObjectURL(wavBlob(chunks, CONFIG.rate));
    player.hidden = false;
    const seconds = (samples / CONFIG.rate).toFixed(2);
    last.onended = () => setStatus("done", "Done: " + seconds + " s of audio, first audio after " +
                                   (firstMs / 1000).toFixed(2) + " s.");
  } catch (e) {
    setStatus("error", "Error: " + e.message);
  } finally {
    button.disabled = false;
  }
}
button.addEventListener("click", speak);
</script>
</body></html>
"""


def page_html(model: str, voices: list[str], sample_rate: int, max_chars: int, speed_range: tuple[float, float]) -> str:
    """The page; `voices` the server's, the first its default (the page's voice menu)."""
    config = json.dumps({"model": model, "rate": sample_rate}).replace("<", "\\u003c")
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in voices)
    return (_TEMPLATE.replace("__CONFIG__", config).replace("__MODEL__", html.escape(model))
            .replace("__VOICE_OPTIONS__", options).replace("__RATE__", str(sample_rate))
            .replace("__MAXCHARS__", str(max_chars)).replace("__SMIN__", str(speed_range[0]))
            .replace("__SMAX__", str(speed_range[1])))
