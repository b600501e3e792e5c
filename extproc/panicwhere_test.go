package extproc

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/envoy/contract"
)

// TestAStepsPanicLabelCostsNoAllocation: Session.Handle names the label for
// every message of a stream (a streamed answer's every piece).
func TestAStepsPanicLabelCostsNoAllocation(t *testing.T) {
	for _, step := range []string{contract.StepRouter, contract.StepUpstream} {
		var where string
		allocs := testing.AllocsPerRun(100, func() { where = panicWhere(step) })
		assert.Zero(t, allocs, step)
		assert.Equal(t, "extproc_"+step, where)
	}
}
