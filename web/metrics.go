package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/router"
)

// metrics is the server's Prometheus registry (not the global one: no globals).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	wsConns  prometheus.GaugeFunc
}

// circuitCollector exports every server's call circuit (router.Breakers) when scraped:
// toolwarden_server_circuit_state is 0 closed, 1 half-open, 2 open; the failures are
// the failed calls in a row; the seconds are how long it has been in that state.
type circuitCollector struct {
	rt                     *router.Router
	state, failures, since *prometheus.Desc
}

func newCircuitCollector(rt *router.Router) *circuitCollector {
	return &circuitCollector{rt: rt,
		state: prometheus.NewDesc("toolwarden_server_circuit_state",
			"Call circuit of each server: 0 closed, 1 half-open, 2 open.", []string{"server", "server_id"}, nil),
		failures: prometheus.NewDesc("toolwarden_server_circuit_failures",
			"Failed calls in a row to each server (the circuit opens at the router's limit).", []string{"server", "server_id"}, nil),
		since: prometheus.NewDesc("toolwarden_server_circuit_state_seconds",
			"Seconds each server's call circuit has been in its current state.", []string{"server", "server_id"}, nil),
	}
}

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.failures
	ch <- c.since
}

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.rt.Breakers() {
		v := 0.0
		switch b.State {
		case router.CircuitHalfOpen:
			v = 1
		case router.CircuitOpen:
			v = 2
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, b.Server, b.ServerID)
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(b.Failures), b.Server, b.ServerID)
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, time.Since(b.Since).Seconds(), b.Server, b.ServerID)
	}
}

// executionsCollector exports how many executions are in each state that is not done
// (toolwarden_executions{status}), read from the database when scraped: shared by
// every replica, so each reports the same figures.
type executionsCollector struct {
	svc  *executions.Service
	log  *slog.Logger
	desc *prometheus.Desc
}

func newExecutionsCollector(svc *executions.Service, log *slog.Logger) *executionsCollector {
	return &executionsCollector{svc: svc, log: log, desc: prometheus.NewDesc("toolwarden_executions",
		"Executions in each state that is not done (planning, awaiting_approval, executing, rolling_back), of every replica.",
		[]string{"status"}, nil)}
}

func (c *executionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// executionsScrapeTimeout bounds the count a scrape waits for: a database that does not
// answer must not hold the scrape (the metric is then left out of it).
const executionsScrapeTimeout = 2 * time.Second

func (c *executionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), executionsScrapeTimeout)
	defer cancel()
	counts, err := c.svc.ActiveCounts(ctx)
	if err != nil {
		// Left out, not an error of the scrape: the other metrics matter most when the
		// database is in trouble.
		c.log.Warn("metrics: the executions were not counted", "err", err)
		return
	}
	for _, st := range executions.ActiveStatuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// callBuckets are a tool call's durations, from a quick read to a long command (a
// terminal command may run an hour; past the last bucket is +Inf).
var callBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newMetrics(liveClients, fragments, checks func() float64, rt *router.Router, execs *executions.Service, log *slog.Logger) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolwarden_http_requests_total", Help: "HTTP requests by method, route and status.",
	}, []string{"method", "route", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "toolwarden_http_request_duration_seconds", Help: "HTTP request latency by route.",
		// Up to a minute: a call held for a person's approval on /mcp is answered within
		// the hold (50 s by default).
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"method", "route"})
	m.wsConns = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolwarden_websocket_connections", Help: "Open websocket connections.",
	}, liveClients)
	rendered := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "toolwarden_websocket_fragments_rendered_total",
		Help: "Event fragments rendered for websocket clients: one per event, however many clients follow it.",
	}, fragments)
	checked := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "toolwarden_websocket_session_checks_total",
		Help: "Checks of a websocket's session or token (a query each): periodic, at an event about its person, at its expiry.",
	}, checks)
	m.reg.MustRegister(m.requests, m.duration, m.wsConns, rendered, checked,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if rt != nil {
		m.reg.MustRegister(newCircuitCollector(rt))
		calls := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolwarden_tool_calls_total",
			Help: "Tool calls by server and outcome: success, tool_error (the tool's own error result), or the code the call was refused or failed with.",
		}, []string{"server", "outcome"})
		took := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolwarden_tool_call_duration_seconds", Help: "Duration of the tool calls their server saw, by server.",
			Buckets: callBuckets,
		}, []string{"server"})
		m.reg.MustRegister(calls, took)
		rt.ObserveCalls(func(o router.CallObservation) {
			calls.WithLabelValues(o.Server, o.Outcome).Inc()
			if o.Ran {
				took.WithLabelValues(o.Server).Observe(o.Seconds)
			}
		})
	}
	if execs != nil {
		m.reg.MustRegister(newExecutionsCollector(execs, log))
	}
	return m
}

func (m *metrics) handler(c echo.Context) error {
	// A collector that fails leaves its metrics out rather than failing the scrape.
	promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(c.Response(), c.Request())
	return nil
}
