package config

// CheckCondition reports whether expr is a valid rule condition.
// TODO(policy36): compile with package policy once it lands.
func CheckCondition(expr string) error { return nil }
