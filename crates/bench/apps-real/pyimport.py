"""A Python program with a large import graph: pandas, scipy and sympy."""
import sys

import pandas
import scipy.optimize
import scipy.signal
import sympy

x = sympy.symbols("x")
print("ready", pandas.__version__, scipy.__version__, sympy.integrate(x**2, x), flush=True)
sys.stdin.read()
