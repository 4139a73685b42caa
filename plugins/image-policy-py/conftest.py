"""Puts the SDK on the path, so `pytest` works from a fresh checkout without installing it."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "guest-sdk-py"))
sys.path.insert(0, os.path.dirname(__file__))
