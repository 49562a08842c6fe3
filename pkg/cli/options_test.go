package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The restart budget is counted over the state's restart history, which keeps 100
// records for at most a week: a budget or window beyond that is refused (exit 2)
// rather than silently allowing more restarts than configured.
func TestBudgetBeyondTheKeptHistoryIsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--max-restarts", "100", "--restart-window", "168h"}, ""},
		{[]string{"--max-restarts", "101"}, "--max-restarts"},
		{[]string{"--restart-window", "336h"}, "--restart-window"},
	} {
		var o CheckOptions
		fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate(DefaultTimeout)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want a usage error naming %s", c.args, err, c.want)
		case c.want != "":
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v: %T is not a usage error", c.args, err)
			}
		}
	}
}
