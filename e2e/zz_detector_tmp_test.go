package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/toolwarden/toolwarden/web/webtest"
)

func TestTmpDetector(t *testing.T) {
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("inline", chromedp.Evaluate[chromedp.Void](`var s=document.createElement("script"); s.textContent="window.x=1"; document.body.appendChild(s); var d=document.createElement("div"); d.setAttribute("style","color:red"); document.body.appendChild(d); setTimeout(function(){ throw new Error("boom") }, 0)`))
	b.waitJS("tick", `new Promise(r => setTimeout(() => r(true), 200))`)
	b.checkConsole()
}
