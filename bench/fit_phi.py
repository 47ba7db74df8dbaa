#!/usr/bin/env python3
"""The coefficients of include/attn/detail/erfc.hpp's Q (Python 3, mpmath).

Phi(-s) = t/2 * exp(-s^2/2 + (1 - t) Q(w)), t = 1/(1 + s/4), w = (2t - (1 + a))/(1 - a),
a = 1/(1 + s_max/4): Q is a Chebyshev fit in w of (log(2 Phi(-s)/t) + s^2/2)/(1 - t), printed
lowest degree first, rounded to float (s_max 15, degree 10) and double (s_max 39, degree 24),
with the fit's error.
"""
import struct

import mpmath as mp

mp.mp.dps = 50
k = mp.mpf(1) / 4


def log_ratio(t):
    s = (1 / t - 1) / k
    return mp.log(2 * mp.ncdf(-s) / t) + s * s / 2


for name, s_max, degree in (("float", 15, 10), ("double", 39, 24)):
    a = 1 / (1 + k * s_max)

    def q(w):
        t = (w * (1 - a) + (1 + a)) / 2
        if abs(1 - t) < mp.mpf(10) ** -30:
            t = 1 - mp.mpf(10) ** -30
        return log_ratio(t) / (1 - t)

    coefficients, error = mp.chebyfit(q, [-1, 1], degree + 1, error=True)
    if name == "float":
        out = [float.hex(struct.unpack("f", struct.pack("f", float(c)))[0]) + "F" for c in reversed(coefficients)]
    else:
        out = [float.hex(float(c)) for c in reversed(coefficients)]
    print(name, "fit error", mp.nstr(error, 3))
    print(", ".join(out))
