/* check/junit.h: `spanprobe check --junit FILE`: the rule outcomes as JUnit XML, the test report
 * format CI systems (GitLab, Jenkins, GitHub actions' test reporters) display.
 *
 *   <testsuites name="spanprobe check" tests= failures= errors= skipped= time=>
 *     <testsuite name="spanprobe check REPORT" ...same counts...>
 *       <testcase classname="spanprobe.check" name="RULE" time="0">   one per rule, in order
 *         <failure message="DETAIL" type="threshold|tolerance">metric, detail, description</failure>
 *         (or <error message= type="rule">, <skipped message=/>, or <system-out> for a pass)
 * Text is escaped for XML (&amp; &lt; &gt; &quot; &apos;); control characters XML 1.0 cannot hold and
 * bytes that are not UTF-8 become '?'. The file is written atomically (io/atomic.h).
 */
#ifndef SP_CHECK_JUNIT_H
#define SP_CHECK_JUNIT_H

#include "check/evaluate.h"

sp_status sp_check_write_junit(const char *path, const char *report_path, const sp_check_results *r, double seconds);

#endif
