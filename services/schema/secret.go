package schema

// MarksSecret reports whether a schema marks its values secret: writeOnly, or format
// "password". The test form hides such inputs and tools.SecretArgNames masks their
// values, so both read the one rule.
func MarksSecret(v View) bool {
	w, _, _ := v.Get("writeOnly")
	return v.Str("format") == "password" || w == true
}
