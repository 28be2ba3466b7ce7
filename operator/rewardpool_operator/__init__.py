"""RewardPool operator: CRD handlers (kopf), pure desired-state builders, sizing and placement checks."""
