"""Trace file -> typed Arrow tables -> Parquet partitions. No analysis happens here."""
