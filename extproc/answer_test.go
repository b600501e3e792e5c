package extproc

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/envoy/contract"
)

func TestAnswersAnswerTheirPhaseWithTheirMutationsInFewAllocations(t *testing.T) {
	common := commonOf
	for _, c := range []struct {
		p    phase
		kind func(*extprocv3.ProcessingResponse) bool
	}{
		{phaseRequestHeaders, func(r *extprocv3.ProcessingResponse) bool { return r.GetRequestHeaders() != nil }},
		{phaseRequestBody, func(r *extprocv3.ProcessingResponse) bool { return r.GetRequestBody() != nil }},
		{phaseResponseHeaders, func(r *extprocv3.ProcessingResponse) bool { return r.GetResponseHeaders() != nil }},
		{phaseResponseBody, func(r *extprocv3.ProcessingResponse) bool { return r.GetResponseBody() != nil }},
	} {
		plain := newAnswer(c.p).msg()
		assert.True(t, c.kind(plain))
		assert.Equal(t, extprocv3.CommonResponse_CONTINUE, common(plain).GetStatus())
		assert.Nil(t, common(plain).GetHeaderMutation(), "no mutation unless asked")
		assert.Nil(t, common(plain).GetBodyMutation())

		full := newAnswer(c.p).setHeaders(contract.SetRawHeaders("x-a", "1"), []string{"x-b"}).replaceBody([]byte("new")).msg()
		assert.True(t, c.kind(full))
		assert.Equal(t, "x-a", common(full).GetHeaderMutation().GetSetHeaders()[0].GetHeader().GetKey())
		assert.Equal(t, []string{"x-b"}, common(full).GetHeaderMutation().GetRemoveHeaders())
		assert.Equal(t, "new", string(common(full).GetBodyMutation().GetBody()))
	}
	assert.Equal(t, 1.0, testing.AllocsPerRun(10, func() { _ = newAnswer(phaseResponseBody).msg() }))
	assert.Equal(t, 2.0, testing.AllocsPerRun(10, func() { _ = newAnswer(phaseRequestBody).setHeaders(nil, nil).replaceBody(nil).msg() }),
		"the answer with its header mutation, and the body mutation")
}
