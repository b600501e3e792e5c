package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tollgate/tollgate/config"
)

// runConfigCheck validates a configuration file without starting anything
// and prints what it defines: each model with its prices, timeouts and
// deployments, each plan with its models. A bad file is an error that names
// the field.
func runConfigCheck(args []string, stdout io.Writer) error {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return usagef("config check: give the configuration file: tollgate config check FILE")
	}
	cfg, err := config.Load(args[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: valid; key prefix %q, max body %d bytes\n\n", args[0], cfg.KeyPrefix, cfg.MaxBodyBytes)
	fmt.Fprintln(tw, "MODEL\tKIND\tMAX_TOKENS\tINPUT $/M\tOUTPUT $/M\tREQUEST_TIMEOUT\tDEPLOYMENTS")
	for i := range cfg.Models {
		m := &cfg.Models[i]
		var deps []string
		for _, d := range m.Deployments {
			p, _ := cfg.Provider(d.Provider)
			state := ""
			if !p.IsEnabled() {
				state = ", disabled"
			}
			deps = append(deps, fmt.Sprintf("%s/%s (%s, priority %d, weight %d%s)", d.Provider, d.Model, p.Type, d.Priority, d.Weight, state))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.ID, m.Kind, m.MaxTokens, m.InputPricePerMillion, m.OutputPricePerMillion,
			m.RequestTimeout.D(), strings.Join(deps, "; "))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PLAN\tDEFAULT_RPM\tMODELS")
	for _, p := range cfg.Plans {
		rpm := fmt.Sprint(p.DefaultRPM)
		if p.DefaultRPM == 0 {
			rpm = "unlimited"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, rpm, strings.Join(p.Models, ", "))
	}
	return tw.Flush()
}
