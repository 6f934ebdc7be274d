// Command mcptestserver runs Toolwarden's MCP test server on its own, so a
// developer can point Toolwarden (or any MCP client) at it by hand:
//
//	go run ./internal/mcptest/cmd/mcptestserver -transport streamable -generated 3000 -page-size 100
//
// The HTTP transports print the URL to connect to; stdio serves on
// stdin/stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolwarden/toolwarden/internal/mcptest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}

func run() error {
	transport := flag.String("transport", "stdio", "stdio, sse or streamable")
	addr := flag.String("addr", "127.0.0.1:0", "listen address for sse and streamable")
	name := flag.String("name", "mcptest", "server name reported in serverInfo")
	generated := flag.Int("generated", 0, "number of extra generated tools gen-00001..gen-N")
	pageSize := flag.Int("page-size", 0, "tools/list page size (0 = SDK default)")
	hang := flag.Bool("hang", false, "accept connections but never answer")
	shapes := flag.Bool("shapes", false, "add the tool shapes (a oneOf, nullable values and maps), which answers with its arguments")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := mcptest.New(&mcptest.Options{Name: *name, Generated: *generated, PageSize: *pageSize, Hang: *hang, Shapes: *shapes})
	var path string
	switch *transport {
	case "stdio":
		return srv.ServeStdio(ctx)
	case "sse":
		path = "/sse"
	case "streamable":
		path = "/mcp"
	default:
		return fmt.Errorf("unknown -transport %q (want stdio, sse or streamable)", *transport)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Both endpoints are always served; the flag only picks which URL to print.
	fmt.Printf("http://%s%s\n", ln.Addr(), path)
	hs := &http.Server{Handler: srv.Handler()}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
