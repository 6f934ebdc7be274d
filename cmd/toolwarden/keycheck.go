package main

import "strings"

// parseLostKeys reads --lost-keys: key ids separated by commas or spaces.
func parseLostKeys(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}
