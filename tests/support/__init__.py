"""Shared test support: certificates, real servers on 127.0.0.1:0, channels
and databases."""
