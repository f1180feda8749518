"""Request profiles and the decode-length predictor."""

from __future__ import annotations

import math

import numpy as np

from seedance.inference.profiles import DecodeLengthPredictor, kv_growth_feature, predictor_error, profile_vector
from seedance.inference.trace import CONV_TRACE, load_azure_trace
from seedance.traces.paths import data_file


def test_profile_distance_is_in_octaves() -> None:
    a = profile_vector(512, 100.0, kv_growth_feature(327_680))
    b = profile_vector(1024, 100.0, kv_growth_feature(327_680))
    assert math.dist(a, b) == 1.0  # twice the prompt = one octave
    assert kv_growth_feature(327_680) == math.log2(320)


def test_predictor_learns_only_what_it_is_told() -> None:
    p = DecodeLengthPredictor(prior=50.0, shrink=0.0)
    assert p.predict(100) == 50.0
    p.observe(100, 10)
    p.observe(3000, 400)
    assert p.predict(100) == 10.0 and p.predict(3000) == 400.0
    assert p.mean == 205.0


def test_online_predictor_beats_the_running_mean_on_the_conversation_trace() -> None:
    t = load_azure_trace(data_file(CONV_TRACE)).head(count=4000)
    p = DecodeLengthPredictor()
    pred, base = np.zeros(len(t)), np.zeros(len(t))
    for i in range(len(t)):  # told each output once the request is over: here, before the next arrival
        pred[i], base[i] = p.predict(int(t.prompt[i])), p.mean
        p.observe(int(t.prompt[i]), int(t.output[i]))
    err = predictor_error(pred, t.output, base)
    assert err.n == 4000
    assert err.mae < 0.9 * err.baseline_mae
    assert err.corr > 0.3
