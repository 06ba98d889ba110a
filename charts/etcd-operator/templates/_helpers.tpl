{{/* The prefix of every object's name: "etcd-operator" for a release named etcd-operator, as `make deploy` names them. */}}
{{- define "etcd-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "etcd-operator.serviceAccountName" -}}
{{ include "etcd-operator.fullname" . }}-controller-manager
{{- end -}}

{{/* Labels on every object. */}}
{{- define "etcd-operator.labels" -}}
app.kubernetes.io/name: etcd-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The operator's pod labels, fixed whatever the release is called: the NetworkPolicies the operator writes for its
clusters admit it by these labels (internal/resources/networkpolicy.go), and selectors are immutable.
*/}}
{{- define "etcd-operator.selectorLabels" -}}
app.kubernetes.io/name: etcd-operator
control-plane: controller-manager
{{- end -}}

{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}

{{/* The subject every binding grants to: the operator's ServiceAccount. */}}
{{- define "etcd-operator.subjects" -}}
subjects:
- kind: ServiceAccount
  name: {{ include "etcd-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
