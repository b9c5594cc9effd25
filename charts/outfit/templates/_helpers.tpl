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
