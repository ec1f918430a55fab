export { scoreInstance, fileTargetOf, type InstanceTruth } from './instance-metrics';
export { summarizeRetriever, estimate, type ScoredInstance, type BootstrapSettings } from './retriever-summary';
export { reportTables, scopeSentence, type ReportTable } from './tables';
export { renderMarkdownReport, type ReportArtifacts } from './markdown';
export { renderHtmlReport, type RetrieverInstances } from './html';
export { histogramSvg, histogramCounts, precisionRecallScatterSvg, type PrecisionRecallPoint } from './svg-charts';
export { ACCURACY_AT_K, RANKED_DEPTH, HISTOGRAM_BINS } from './params';
