#!/usr/bin/env python3
"""Fits kernels/cpu/vmath512.c's table for gelu (erf form) on |x| < 3.75.

Phi(x) = erfc(-x / sqrt 2) / 2 on the 15 intervals of width 1/2 centred on
c = j/2, j = -7..7, as a degree-7 polynomial in u = x - c each. Least
squares of the relative error on Chebyshev nodes, one coefficient rounded to
float32 at a time from the constant term up, the rest refitted around it
(so the higher terms absorb the rounding of the lower). Prints the table as
vmath512.c holds it: row k is the u^k coefficient, column j mod 16 (column 8
unused). Run: .venv/bin/python tools/fit_gelu_phi.py
"""
import math

import numpy as np

DEG, HALF = 7, 0.2501  # a little past 1/4: 2x rounded to an integer can land on either side


def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def fit(c):
    u = HALF * np.cos(np.pi * (np.arange(400) + 0.5) / 400)
    y = np.array([phi(c + t) for t in u])
    coef = []
    for k in range(DEG + 1):
        r = y - sum(ck * u**i for i, ck in enumerate(coef))
        v = np.vstack([u**i for i in range(k, DEG + 1)]).T / y[:, None]
        sol, *_ = np.linalg.lstsq(v, r / y, rcond=None)
        coef.append(float(np.float32(sol[0])))
    ut = np.linspace(-HALF, HALF, 4001)
    yt = np.array([phi(c + t) for t in ut])
    err = np.max(np.abs(sum(ck * ut**i for i, ck in enumerate(coef)) / yt - 1))
    return coef, err


def main():
    table = [[0.0] * 16 for _ in range(DEG + 1)]
    worst = 0.0
    for j in range(-7, 8):
        coef, err = fit(j / 2)
        worst = max(worst, err)
        for k in range(DEG + 1):
            table[k][j % 16] = coef[k]
    print("/* fit error at most %.2f x 2^-24 of Phi */" % (worst / 2**-24))
    for row in table:
        print("{" + ", ".join("%.9g" % v if v else "0" for v in row) + "},")


if __name__ == "__main__":
    main()
