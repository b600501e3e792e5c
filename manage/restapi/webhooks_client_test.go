package restapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage/restapi/internal/apiclient"
)

// driveWebhooks goes through the webhook calls with the generated client:
// a threshold, an endpoint added (its secret once), read, listed,
// disabled, tested, its log read, and deleted.
func driveWebhooks(t *testing.T, admin *apiclient.ClientWithResponses, accountID string) {
	ctx := context.Background()
	set, err := admin.SetPlanWithResponse(ctx, accountID, apiclient.SetPlanJSONRequestBody{LowBalanceThresholdUsd: ptr(2.5)})
	require.NoError(t, err)
	require.NotNil(t, set.JSON200, "%s", set.Body)
	require.NotNil(t, set.JSON200.LowBalanceThresholdUsd)
	assert.Equal(t, 2.5, *set.JSON200.LowBalanceThresholdUsd)

	made, err := admin.CreateWebhookWithResponse(ctx, &apiclient.CreateWebhookParams{},
		apiclient.WebhookCreate{AccountId: &accountID, Url: "https://hooks.example.com/tollgate", Description: ptr("ops")})
	require.NoError(t, err)
	require.NotNil(t, made.JSON201, "%s", made.Body)
	assert.Regexp(t, `^whsec_`, made.JSON201.Secret)
	id := made.JSON201.Id
	got, err := admin.GetWebhookWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, got.JSON200, "%s", got.Body)
	assert.NotContains(t, string(got.Body), made.JSON201.Secret, "the secret is shown once")
	listed, err := admin.ListWebhooksWithResponse(ctx, &apiclient.ListWebhooksParams{AccountId: &accountID})
	require.NoError(t, err)
	require.NotNil(t, listed.JSON200)
	require.Len(t, listed.JSON200.Data, 1)
	off, err := admin.UpdateWebhookWithResponse(ctx, id, apiclient.WebhookPatch{Enabled: false})
	require.NoError(t, err)
	require.NotNil(t, off.JSON200, "%s", off.Body)
	assert.False(t, off.JSON200.Enabled)
	ping, err := admin.TestWebhookWithResponse(ctx, id, &apiclient.TestWebhookParams{})
	require.NoError(t, err)
	require.NotNil(t, ping.JSON202, "%s", ping.Body)
	log, err := admin.ListWebhookDeliveriesWithResponse(ctx, id, &apiclient.ListWebhookDeliveriesParams{})
	require.NoError(t, err)
	require.NotNil(t, log.JSON200, "%s", log.Body)
	require.Len(t, log.JSON200.Data, 1)
	assert.Equal(t, ping.JSON202.EventId, log.JSON200.Data[0].EventId)
	assert.Equal(t, "ping", log.JSON200.Data[0].EventType)
	assert.Equal(t, apiclient.WebhookDeliveryStatus("pending"), log.JSON200.Data[0].Status)
	gone, err := admin.DeleteWebhookWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, gone.JSON200, "%s", gone.Body)
}
