{{/* The labels `outfit manifests` puts on every object of the webhook (and pod template). */}}
{{- define "outfit.labels" -}}
app.kubernetes.io/name: outfit
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The same for the workspace backend. */}}
{{- define "outfit.workspaces.labels" -}}
app.kubernetes.io/name: outfit-workspaces
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* What Helm's conventions add on the objects' own metadata (never on selectors). */}}
{{- define "outfit.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "outfit.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Where the serving certificate comes from: outfit (it mints and rotates it in the Secret
  outfit-tls), certManager, or provided (the team's Secret, its CA in webhook.caBundle). Refuses
  what `outfit manifests` refuses. */}}
{{- define "outfit.certificates" -}}
{{- if and .Values.certManager.enabled .Values.webhook.caBundle }}
{{- fail "certManager.enabled and webhook.caBundle: cert-manager injects the CA; give one or the other" }}
{{- end }}
{{- if .Values.certManager.enabled }}certManager
{{- else if .Values.webhook.caBundle }}provided
{{- else }}
{{- if not .Values.webhook.manage }}
{{- fail "webhook.manage false needs webhook.caBundle or certManager.enabled: outfit's own certificate rotates its CA into caBundle" }}
{{- end }}outfit
{{- end }}
{{- end }}
