package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/views"
)

// executionLog is the log of topic up to event last: its newest lines and how many
// older ones are left out.
func (h ExecutionsHandler) executionLog(ctx context.Context, topic string, last int64) ([]views.ExecutionLogLine, int, error) {
	evs, older, err := h.Events.Tail(ctx, topic, last, execLogShown)
	if err != nil {
		return nil, 0, err
	}
	lines := make([]views.ExecutionLogLine, len(evs))
	for i, ev := range evs {
		lines[i] = executionLogLine(ev)
	}
	return lines, int(older), nil
}

// executionLogLine is the log line of one event of an execution's topic: one of the
// executions' kinds or the router's call events (events catalogue). An event that
// does not decode gets a line too, its kind.
func executionLogLine(ev events.Event) views.ExecutionLogLine {
	l := views.ExecutionLogLine{EventID: ev.ID, At: ev.CreatedAt, Kind: ev.Kind, Level: "info", Text: ev.Kind}
	switch ev.Kind {
	case string(events.PlanCreated):
		if p, err := events.PlanCreated.Decode(ev); err == nil {
			l.Text = "Plan created by " + p.Requester + ": " + views.Plural(p.Steps, "step", "steps")
			if p.Risk != "" {
				l.Text += ", " + p.Risk + " risk"
			}
		}
	case string(events.ApprovalRequested):
		p, _ := events.ApprovalRequested.Decode(ev)
		l.Text, l.Level = "Waiting for approval ("+p.Risk+" risk)", "warn"
	case string(events.ApprovalGranted):
		p, _ := events.ApprovalGranted.Decode(ev)
		l.Level = "ok"
		switch p.Approval {
		case "policy":
			l.Text = "Approved by policy: every step is low risk"
		case "phrase":
			l.Text = "Approved by " + p.Approver + " with the typed phrase"
		default:
			l.Text = "Confirmed by " + p.Approver
		}
		if p.SelfApproved {
			l.Text += " (its own requester: nobody else could approve it)"
		}
	case string(events.ApprovalRejected):
		p, _ := events.ApprovalRejected.Decode(ev)
		l.Text, l.Level = "Rejected by "+p.By+": "+p.Reason, "error"
	case string(events.ExecutionCancelled):
		p, _ := events.ExecutionCancelled.Decode(ev)
		l.Text, l.Level = "Cancelled", "warn"
		if p.By != "" {
			l.Text += " by " + p.By
		}
		if p.Reason != "" {
			l.Text += ": " + p.Reason
		}
	case string(events.ExecutionExpired):
		l.Text, l.Level = "Expired: nobody approved it in time", "warn"
	case string(events.ExecutionSucceeded):
		l.Text, l.Level = "Finished: every step succeeded", "ok"
	case string(events.ExecutionFailed):
		p, _ := events.ExecutionFailed.Decode(ev)
		l.Text, l.Level = "Failed: "+p.Error, "error"
	case string(events.RollbackStarted):
		l.Text = "Rollback started"
		if p, err := events.RollbackStarted.Decode(ev); err == nil {
			l.Text += ": " + views.Plural(p.Steps, "undo step", "undo steps")
			if len(p.NotUndone) > 0 {
				l.Text += "; nothing undoes " + strings.Join(p.NotUndone, ", ")
			}
		}
	case string(events.RollbackCompleted):
		l.Text, l.Level = "Rolled back", "ok"
	case string(events.RollbackFailed):
		p, _ := events.RollbackFailed.Decode(ev)
		l.Text, l.Level = "Rollback failed: "+p.Error, "error"
	case string(events.ToolStarted):
		p, _ := events.ToolStarted.Decode(ev)
		l.Text = p.Tool + " started"
		if p.Display != "" {
			l.Text += ": " + p.Display // what it does, as its tool says ("Creating file notes.txt")
		}
	case string(events.ToolOutput):
		p, _ := events.ToolOutput.Decode(ev)
		l.Text = p.Tool + ": "
		if p.Progress.Message != "" {
			l.Text += p.Progress.Message
		} else {
			l.Text += "working"
		}
		if p.Progress.Total > 0 {
			l.Text += fmt.Sprintf(" (%g of %g)", p.Progress.Progress, p.Progress.Total)
		}
	case string(events.ToolCompleted):
		p, _ := events.ToolCompleted.Decode(ev)
		dur := fmt.Sprintf(" in %.1f ms", p.DurationMS)
		if p.IsError {
			l.Text, l.Level = p.Tool+" reported an error"+dur, "error"
		} else {
			l.Text, l.Level = p.Tool+" completed"+dur, "ok"
		}
		if p.Summary != "" && !executions.PrivateResult(p.Tool) { // every viewer reads the log
			l.Text += ": " + p.Summary
		}
	case string(events.ToolFailed):
		p, _ := events.ToolFailed.Decode(ev)
		if p.CallID == "" && p.Code == "tool_disabled" {
			// No call was made: a step waits for its tool to be callable again
			// (executions' waitTransient), which the message says since when.
			l.Text, l.Level = p.Tool+" cannot be called now: "+p.Message, "warn"
			break
		}
		l.Text, l.Level = p.Tool+" failed", "error"
		if p.Code != "" {
			l.Text += " (" + p.Code + ")"
		}
		if p.Message != "" {
			l.Text += ": " + p.Message
		}
	}
	return l
}

// progressText is a tool.output event's progress for the stepper, by call id.
func progressText(ev events.Event) map[string]string {
	if !events.ToolOutput.Is(ev) {
		return nil
	}
	p, err := events.ToolOutput.Decode(ev)
	if err != nil || p.CallID == "" {
		return nil
	}
	t := p.Progress.Message
	if p.Progress.Total > 0 {
		if t != "" {
			t += " · "
		}
		t += fmt.Sprintf("%.0f%%", 100*p.Progress.Progress/p.Progress.Total)
	}
	return map[string]string{p.CallID: t}
}
