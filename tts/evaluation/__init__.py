"""Objective evaluation (DESIGN.md section 6): MCD/F0 with DTW, ASR judge, MOS predictors, lengths, reports.

Heavy optional dependencies (faster-whisper, distillmos, speechmos) are imported lazily by the
modules that need them; pins are in pyproject.toml (extra "eval").
"""

from tts.evaluation.lengths import FailureRates, LengthError, ar_failure_rates, duration_error, length_error
from tts.evaluation.mcd import MCDResult, mcd
from tts.evaluation.pitch import PairMetrics, evaluate_pair, log_f0_rmse_cents, vuv_error_rate
from tts.evaluation.report import summarise, write_report

__all__ = [
    "FailureRates", "LengthError", "MCDResult", "PairMetrics", "ar_failure_rates", "duration_error",
    "evaluate_pair", "length_error", "log_f0_rmse_cents", "mcd", "summarise", "vuv_error_rate",
    "write_report",
]
