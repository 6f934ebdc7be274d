package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
)

// expiresIn is --expires-in-days as NewToken takes it: a negative count (the flag's
// default) takes the default lifetime.
func expiresIn(days int) *int {
	if days < 0 {
		return nil
	}
	return &days
}

// tokenDefaultTTL reads --token-default-ttl or TOOLWARDEN_TOKEN_DEFAULT_TTL (the caller
// names which in its error): a duration (2160h) or a number of days (90d); 0 means
// tokens without an expiry do not expire. Empty: auth.DefaultTokenTTL.
func tokenDefaultTTL(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return auth.DefaultTokenTTL, nil
	}
	if v == "0" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days >= 0 && days <= 3650 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d >= 0 && d <= 3650*24*time.Hour {
		return d, nil
	}
	return 0, fmt.Errorf("%q is not a number of days such as 90d, a duration such as 720h, or 0 (no expiry)", v)
}
