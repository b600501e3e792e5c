package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// How times are shown. Every time is shown in UTC, the zone expiry dates and
// usage buckets are counted in.
const (
	timeLayout = "2006-01-02 15:04 UTC"
	dateLayout = keyopts.DateLayout
)

// usd formats an amount as US dollars by one rule everywhere: from $1 up,
// to the cent ($9.9993316 → $10.00, $1,234.50); below, to four significant
// digits ($0.15, $0.0006, $0.00043512 → $0.0004351), so that a small cost
// is never shown as $0.00 nor with nine decimals. Halves round away from
// zero.
func usd(n money.Nanos) string {
	sign := ""
	if n < 0 {
		sign = "-"
		n = -n // a balance never reaches -2^63 nano-dollars
	}
	const cent = money.PerDollar / 100
	if n >= money.PerDollar {
		cents := (n + cent/2) / cent
		return sign + "$" + groupThousands(strconv.FormatInt(int64(cents/100), 10)) + fmt.Sprintf(".%02d", cents%100)
	}
	if n > 0 {
		// Keep four significant digits of the nine decimals.
		digits := len(strconv.FormatInt(int64(n), 10))
		if digits > 4 {
			unit := money.Nanos(1)
			for range digits - 4 {
				unit *= 10
			}
			n = (n + unit/2) / unit * unit
		}
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", int64(n)), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	if n >= money.PerDollar { // 0.99995… rounded up to a dollar
		return sign + "$1.00"
	}
	return sign + "$0." + frac
}

// groupThousands puts commas between groups of three digits.
func groupThousands(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	first := len(digits) % 3
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// count formats a whole number with thousands separators.
func count(n int64) string {
	if n < 0 {
		return "-" + groupThousands(strconv.FormatInt(-n, 10))
	}
	return groupThousands(strconv.FormatInt(n, 10))
}

// percent formats part/total as a percentage with one decimal, or "–" when
// there is no total.
func percent(part, total int64) string {
	if total <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(total))
}

func statusLabel(k store.Key, now time.Time) string {
	switch k.Status(now) {
	case store.StatusDisabled:
		return "Disabled"
	case store.StatusExpired:
		return "Expired"
	default:
		return "Enabled"
	}
}

func rateLimitLabel(rpm *int) string {
	if rpm == nil {
		return "Off"
	}
	return count(int64(*rpm)) + " RPM"
}

func ipsLabel(ips []string) string {
	if len(ips) == 0 {
		return "Any"
	}
	return strings.Join(ips, ", ")
}

func modelsLabel(models []string) string {
	if models == nil {
		return "All Models"
	}
	return strings.Join(models, ", ")
}

// expiryLabel shows a key's expiry the way it was entered: "Never", the last
// day the key works, or an exact time.
func expiryLabel(t *time.Time) string {
	if t == nil {
		return "Never"
	}
	if d, ok := keyopts.ExpiryDate(*t); ok {
		return d
	}
	return t.UTC().Format(timeLayout)
}

func timeLabel(t *time.Time) string {
	if t == nil {
		return "Never"
	}
	return t.UTC().Format(timeLayout)
}

// relativeTime says how long before now t was, for a list to be scanned:
// "just now", "5 min ago", "3 h ago", "2 days ago"; from 30 days on, the
// date. A time after now (clocks of two replicas) is "just now".
func relativeTime(t, now time.Time) string {
	ago := now.Sub(t)
	switch {
	case ago < time.Minute:
		return "just now"
	case ago < time.Hour:
		return strconv.Itoa(int(ago/time.Minute)) + " min ago"
	case ago < 24*time.Hour:
		return strconv.Itoa(int(ago/time.Hour)) + " h ago"
	case ago < 48*time.Hour:
		return "1 day ago"
	case ago < 30*24*time.Hour:
		return strconv.Itoa(int(ago/(24*time.Hour))) + " days ago"
	}
	return t.UTC().Format(dateLayout)
}

// shownTime is a time as a page shows it, in a <time> element: Text on
// the page, UTC (the exact time) and ISO (for the page's script, which
// adds the visitor's local time) beside it.
type shownTime struct {
	Text, UTC, ISO string
}

// timeShown shows t as text; nil gives Text "Never" and no time.
func timeShown(t *time.Time, text func(time.Time) string) shownTime {
	if t == nil {
		return shownTime{Text: "Never"}
	}
	return shownTime{Text: text(*t), UTC: t.UTC().Format(timeLayout), ISO: t.UTC().Format(time.RFC3339)}
}
