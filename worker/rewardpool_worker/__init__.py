"""RewardPool worker runtime. Importing this package stays light: torch, Ray and Mooncake load only in the
modules that need them, so the operator can import the shared contract (`config`)."""
