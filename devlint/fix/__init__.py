"""Fixes: the vocabulary of edits (`plan`), the device binding every fix names (`binding`),
and turning plans into applied text edits (`apply`)."""
