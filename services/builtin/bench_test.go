package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file operations' timings (seed 001's table), through the MCP server in process:
// read_file of a small file, of a 10 MiB one with a limit, and grep_search over
// 10,000 files.

func BenchmarkReadFileSmall(b *testing.B) {
	f := newFilesFx(b)
	line := strings.Repeat("x", 63) + "\n"
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "small.txt"), []byte(strings.Repeat(line, 16)), 0o644); err != nil {
		b.Fatal(err)
	}
	a := args{"operation": "read_file", "filePath": "small.txt"}
	for b.Loop() {
		if res := f.call("c1", a); res.IsError {
			b.Fatal(text(res))
		}
	}
}

func BenchmarkReadFileLarge(b *testing.B) {
	f := newFilesFx(b)
	line := strings.Repeat("y", 99) + "\n"
	if err := os.WriteFile(filepath.Join(f.ws("c1"), "large.txt"), []byte(strings.Repeat(line, 10<<20/100)), 0o644); err != nil {
		b.Fatal(err)
	}
	a := args{"operation": "read_file", "filePath": "large.txt", "offset": 50000, "limit": 1000}
	for b.Loop() {
		if res := f.call("c1", a); res.IsError {
			b.Fatal(text(res))
		}
	}
}

func BenchmarkGrepSearch10kFiles(b *testing.B) {
	f := newFilesFx(b)
	ws := f.ws("c1")
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			body := fmt.Sprintf("package pkg%03d\n\n// file %d\nfunc F%d() int { return %d }\n", d, i, i, i)
			if d == 42 && i == 7 {
				body += "// NEEDLE here\n"
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", i)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	a := args{"operation": "grep_search", "pattern": "NEEDLE"}
	for b.Loop() {
		if res := f.call("c1", a); res.IsError || !strings.Contains(text(res), "pkg042/f007.go:5:") {
			b.Fatal(text(res))
		}
	}
}
