"""Data layer: dataset registry, checksummed fetching (network or mirror), parsers, prepared caches."""
